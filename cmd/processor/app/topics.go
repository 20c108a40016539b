package app

import (
	"slices"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/settings"
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

// checkDestinations refuses, before anything connects, a fixed destination
// of the chain (such as PROCESSOR_ROUTE_DEFAULT) that is an input topic,
// which would feed the processor its own output, or the dead-letter topic,
// which would mix outputs into the dead letters. Records routed there at
// run time fail under the policy; a fixed destination would fail them all.
func checkDestinations(cfg *config.Config, chain *transform.Chain) error {
	for _, d := range chain.Destinations() {
		why := ""
		switch {
		case slices.Contains(cfg.InputTopics, d.Topic):
			why = "a topic that is not also in PROCESSOR_INPUT_TOPICS (the processor would consume its own output forever)"
		case cfg.Sink == "kafka" && cfg.DLQTopic != "" && d.Topic == cfg.DLQTopic:
			why = "a topic other than PROCESSOR_DLQ_TOPIC (outputs would be mixed into the dead letters)"
		default:
			continue
		}
		return &settings.Error{Var: PluginVar(d.Entry.Plugin(), d.Setting), Value: d.Topic, Want: settings.Say(why)}
	}
	return nil
}
