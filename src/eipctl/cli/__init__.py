"""eipctl.cli."""
