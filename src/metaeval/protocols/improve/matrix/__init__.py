"""The experiment matrix (AIE Bench Tables 2-4): lanes x benchmark sets (x seeds) from one
config file, each cell an ordinary improve bundle, and the matrix report over them."""
