import Foundation

// interlude: the command-line client; see CLI.swift.
exit(await CLI.run(Array(CommandLine.arguments.dropFirst())))
