import Testing
@Test func placeholder_InterludeSoundTests() { #expect(Bool(true)) }
