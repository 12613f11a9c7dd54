"""eipctl.controller."""
