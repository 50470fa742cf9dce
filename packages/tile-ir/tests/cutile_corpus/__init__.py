"""cuTile Python kernels exported as the tile-ir corpus (test data; see `cutile_corpus.kernels`)."""
