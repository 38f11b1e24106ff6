"""The build-and-find report: `pages` renders the Markdown and the one self-contained HTML page
(template in `templates/`) from the analysis tables; `headline` holds its headline figures,
`claims` the map from each headline figure to the table, rows and command that back it,
`extra_sections` the restricted-view sections, and `figures`, `figures_effort` and
`figures_paper` draw the figures as inline SVG and as files.
"""
