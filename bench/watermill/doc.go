// Package watermill compares the dibs stream runtime with the Redis Streams
// subscriber of github.com/ThreeDotsLabs/watermill-redisstream on the same
// Redis and the same entries. It is a module of its own so dibs itself never
// depends on watermill. Run it with:
//
//	cd bench/watermill && go test -run '^$' -bench . -benchtime 200000x
package watermill
