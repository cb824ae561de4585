module local.invalid/perfops-k8s-volumes

go 1.22
