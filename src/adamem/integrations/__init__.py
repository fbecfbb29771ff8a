"""Plug the memory into agents: an MCP server, LangChain/LangGraph classes, and hybrid queries.

``adamem.memory.Memory``, the library's facade, is the one handle they share (writes publish to
the log and wait until projected). ``mcp_server`` needs the ``mcp`` extra, ``langchain`` and ``langgraph_store`` the
``langchain`` extra; ``hybrid`` needs neither. Nothing below this layer imports it.
"""
