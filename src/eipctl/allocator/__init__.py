"""eipctl.allocator."""
