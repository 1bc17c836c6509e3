"""embedq as an MCP server: every tool goes through one process-wide pipeline."""
