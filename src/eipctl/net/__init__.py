"""Host networking edge: links (netlink or in-memory), GARP/NA announcements, address probes."""
