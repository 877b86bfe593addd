module github.com/realm-go/realm/listen-svc

go 1.26.8
