"""Checks of a built artifact, run when a build cell ends and again by `verify-release`:
`validation` is the primary compile probe, the structural metadata and the leakage scan;
`relaxed_probe` is the relaxed compile probe of the paper's Appendix G and its Table 10.
"""
