"""The sandbox: an embedded Kubernetes API emulator, simulated nodes, and `eipctl sandbox`."""
