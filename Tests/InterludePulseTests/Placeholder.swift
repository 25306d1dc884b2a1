import Testing
@Test func placeholder_InterludePulseTests() { #expect(Bool(true)) }
