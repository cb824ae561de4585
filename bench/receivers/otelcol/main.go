// perfops-otelcol: an OpenTelemetry Collector with only what the perfops tests need:
// the OTLP receiver (gRPC and HTTP), the otlp_http exporter (to Prometheus' OTLP
// endpoint), the otlp exporter (gRPC: one collector forwarding to another, a gRPC
// sender that is not perfops) and the debug exporter. Built by
// bench/receivers/install.sh; the distributions made by the builder (otelcol-contrib)
// pull in hundreds of components and their SDKs, which would multiply the build time
// for nothing.
package main

import (
	"fmt"
	"os"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/confmap/provider/yamlprovider"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/debugexporter"
	"go.opentelemetry.io/collector/exporter/otlpexporter"
	"go.opentelemetry.io/collector/exporter/otlphttpexporter"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
)

// version is the collector release the go.mod pins; install.sh checks that
// `perfops-otelcol --version` prints it.
const version = "0.165.0"

func components() (otelcol.Factories, error) {
	var err error
	// The collector's own logs and (switched off in the tests' configuration) metrics.
	factories := otelcol.Factories{Telemetry: otelconftelemetry.NewFactory()}
	if factories.Receivers, err = otelcol.MakeFactoryMap[receiver.Factory](
		otlpreceiver.NewFactory(),
	); err != nil {
		return otelcol.Factories{}, err
	}
	if factories.Exporters, err = otelcol.MakeFactoryMap[exporter.Factory](
		otlphttpexporter.NewFactory(),
		otlpexporter.NewFactory(),
		debugexporter.NewFactory(),
	); err != nil {
		return otelcol.Factories{}, err
	}
	return factories, nil
}

func main() {
	settings := otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{
			Command:     "perfops-otelcol",
			Description: "OpenTelemetry Collector for the perfops tests (otlp receiver; otlphttp and debug exporters)",
			Version:     version,
		},
		Factories: components,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				ProviderFactories: []confmap.ProviderFactory{
					envprovider.NewFactory(),
					fileprovider.NewFactory(),
					yamlprovider.NewFactory(),
				},
			},
		},
	}
	if err := otelcol.NewCommand(settings).Execute(); err != nil {
		fmt.Fprintf(os.Stderr, "perfops-otelcol: %v\n", err)
		os.Exit(1)
	}
}
