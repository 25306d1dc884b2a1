import Foundation

// interlude-push: `interlude push`, the provider's side of remote notifications; see PushCLI.swift.
// `interlude` execs this program for it (it links libmosquitto).
exit(PushCLI.run(Array(CommandLine.arguments.dropFirst())))
