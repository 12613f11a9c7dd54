"""`kubectl eipctl` (and `eipctl status|why|nodes`): where each external IP is, since when,
why it moved, and why a Service has none. Reads the API only; the reasoning is pure
(`plugin.why`, `plugin.status`), the I/O is `plugin.main`."""
