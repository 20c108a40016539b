package app

import (
	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/transform"
)

// requiredTopics maps the topics that must exist before processing starts
// (the output topic, the dead-letter topic, and the fixed destinations of
// the chain's transforms, such as PROCESSOR_ROUTE_DEFAULT) to the variable
// that names each.
func requiredTopics(cfg *config.Config, chain *transform.Chain) map[string]string {
	topics := map[string]string{cfg.OutputTopic: config.EnvName("OUTPUT_TOPIC")}
	if cfg.OnError == "dlq" {
		topics[cfg.DLQTopic] = config.EnvName("DLQ_TOPIC")
	}
	if cfg.LateTopic != "" && len(chain.Stores()) > 0 {
		topics[cfg.LateTopic] = config.EnvName("LATE_TOPIC")
	}
	for _, d := range chain.Destinations() {
		if _, ok := topics[d.Topic]; !ok {
			topics[d.Topic] = PluginVar(d.Entry.Plugin(), d.Setting)
		}
	}
	return topics
}
