module github.com/realm-go/realm/agent-svc

go 1.26.8
