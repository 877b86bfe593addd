module github.com/realm-go/realm/mcp-svc

go 1.26.8
