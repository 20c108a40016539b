package app

import (
	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/pipeline"
)

// pipelineSetting names the settings that the pipeline's messages (logs,
// /healthz, the error header of a dead letter) tell the user to change by
// their environment variables.
func pipelineSetting(s pipeline.Setting) string {
	switch s {
	case pipeline.SettingOnError:
		return config.EnvName("ON_ERROR")
	case pipeline.SettingTransformTimeout:
		return config.EnvName("TRANSFORM_TIMEOUT")
	case pipeline.SettingTransactionTimeout:
		return config.EnvName("TRANSACTION_TIMEOUT")
	case pipeline.SettingMaxCrashAttempts:
		return config.EnvName("MAX_CRASH_ATTEMPTS")
	}
	return string(s)
}
