"""eipctl.scheduler."""
