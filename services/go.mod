module github.com/realm-go/realm/services

go 1.26.8
