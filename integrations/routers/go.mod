module github.com/sluicehq/sluice/integrations/routers

go 1.26.0

replace github.com/sluicehq/sluice => ../..

require (
	github.com/go-chi/chi/v5 v5.5.0
	github.com/gorilla/mux v1.8.1
	github.com/sluicehq/sluice v0.0.0
	github.com/stretchr/testify v1.12.1
)

require go.yaml.in/yaml/v3 v3.0.5 // indirect
