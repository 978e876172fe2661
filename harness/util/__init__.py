"""Small helpers with one owner each: atomic writes, the bounded reader, child commands, paths, text."""
