package pull

import (
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policyc/policyc/catalog"
)

// convertTool records a listed tool as the snapshot keeps it; the snapshot's
// encoding canonicalizes its schemas.
func convertTool(t *mcp.Tool) (catalog.Tool, error) {
	return catalog.ToolFromMCP(t)
}
