import Testing
@Test func placeholder_InterludeConfigTests() { #expect(Bool(true)) }
