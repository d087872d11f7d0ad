//go:build race

package sender_test

// raceDetector says the tests run under the race detector, whose
// instrumentation moves some values to the heap.
const raceDetector = true
