package txn

import (
	"context"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"
)

// kgoLogger routes franz-go's own logs into slog. franz-go logs every
// transaction at info, so its info becomes our debug; and so do its
// warnings and errors about a refused connection (credentials,
// certificates), which it logs per connection attempt: Init reports the
// refusal itself, once, as the error that stops the processor.
type kgoLogger struct{ l *slog.Logger }

func (k kgoLogger) Level() kgo.LogLevel {
	ctx := context.Background()
	switch {
	case k.l.Enabled(ctx, slog.LevelDebug):
		return kgo.LogLevelInfo
	case k.l.Enabled(ctx, slog.LevelWarn):
		return kgo.LogLevelWarn
	}
	return kgo.LogLevelError
}

func (k kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	l := slog.LevelDebug
	switch {
	case refusal(keyvals):
	case level == kgo.LogLevelError:
		l = slog.LevelError
	case level == kgo.LogLevelWarn:
		l = slog.LevelWarn
	}
	k.l.Log(context.Background(), l, "kafka client: "+msg, keyvals...)
}

// refusal reports whether one of a log line's values is an error that
// accessKind recognises.
func refusal(keyvals []any) bool {
	for _, v := range keyvals {
		if err, ok := v.(error); ok && accessKind(err) != 0 {
			return true
		}
	}
	return false
}
