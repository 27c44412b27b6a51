"""Example networks built with each framework's own API, and the bundled assets."""
