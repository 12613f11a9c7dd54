"""`eipctl nodeips`: an IP of its own for every labelled Node (docs/node-ips.md)."""
