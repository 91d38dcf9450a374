"""The dashboard's pages, rendered on the server: one module per page, the frame every page is
drawn in (frame.py), and what the pages share (ui, icons, markdown, a turn's view, channels'
view).
"""
