"""The memory inspector's parts: HTML (``ui.html``) and an owner's memory as of a point (``ui.inspect``).

The routes are in ``api.routes.ui``. Pages are rendered on the server from small functions over
``html.escape``; the one stylesheet and the few lines of script are inline, so the inspector needs
no file beside the Python code and nothing from the network.
"""
