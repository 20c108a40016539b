package launch_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/streamproc/processor/internal/launch"
)

// An instance renders the PROCESSOR_* variables it sets, and nothing else.
func ExampleInstance_Env() {
	in := launch.Instance{
		Brokers:         []string{"127.0.0.1:9092"},
		Group:           "demo",
		InputTopics:     []string{"orders"},
		OutputTopic:     "orders-out",
		TransactionalID: "demo-1",
		CommitInterval:  200 * time.Millisecond,
		Extra:           []string{"PROCESSOR_EMBEDDED_BROKER=true"},
	}
	fmt.Println(strings.Join(in.Env(), "\n"))
	// Output:
	// PROCESSOR_BROKERS=127.0.0.1:9092
	// PROCESSOR_GROUP=demo
	// PROCESSOR_INPUT_TOPICS=orders
	// PROCESSOR_OUTPUT_TOPIC=orders-out
	// PROCESSOR_TRANSACTIONAL_ID=demo-1
	// PROCESSOR_COMMIT_INTERVAL=200ms
	// PROCESSOR_EMBEDDED_BROKER=true
}

// A test starts a binary with a deadline, its output in a writer it
// reads once the process has ended (here a shell stands in for the
// processor binary).
func ExampleStart() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // killed at the deadline
	defer cancel()
	var logs strings.Builder
	c := launch.Instance{Group: "demo"}.Command("/bin/sh", launch.PathOnly)
	c.Args = []string{"-c", `echo "group $PROCESSOR_GROUP" >&2; exit 3`}
	c.Output, c.WaitDelay = &logs, 5*time.Second
	p, err := launch.Start(ctx, c)
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = p.Wait()
	fmt.Print(logs.String())
	fmt.Println("exit code:", p.ExitCode())
	// Output:
	// group demo
	// exit code: 3
}
