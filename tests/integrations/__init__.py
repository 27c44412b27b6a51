"""Tests of the frontends (one folder each) and of what they share."""
