"""The `fusebridge` command (command.py) and the names it gives output files (output_files.py).
`fusebridge bench`'s peers and progress live in fusebridge/bench/."""
