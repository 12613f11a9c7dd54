"""Cloud providers of public addresses (node IPs of pools with ``spec.provider``)."""
