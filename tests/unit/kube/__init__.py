"""Tests of eipctl.kube (a package so module names cannot collide with other test dirs)."""
