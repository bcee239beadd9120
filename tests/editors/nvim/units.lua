-- The plugin's pure parts, without a daemon: the framing's bounds, the socket path and
-- the socket file checks, and the answers the inbox prompts make from each schema.
local T = dofile(os.getenv('PR_TEST_DIR') .. '/harness.lua')

T.run(function()
  -- framing: lines split across reads, empty lines skipped, a long line refused
  local framing = require('pokeralph.framing')
  local d = framing.decoder(16)
  local got = {}
  for _, chunk in ipairs({ '{"a"', ':1}\n\n{"b":2}\n{', '"c":3}\n' }) do
    vim.list_extend(got, assert(d:feed(chunk)))
  end
  T.check('lines', got)
  local long = framing.decoder(16)
  local none, err = long:feed(string.rep('x', 10))
  local again, err2 = long:feed(string.rep('x', 10))
  T.check('long', { first = none, second = again == nil, err = err2 })
  local _, err3 = framing.decoder(16):feed(string.rep('y', 17) .. '\n')
  T.check('long_line', err3 or vim.NIL)

  -- the socket path, as pokeralphctl computes it (compared by the test)
  local paths = require('pokeralph.paths')
  T.check('socket', paths.socket_path(os.getenv('PR_TEST_EXPLICIT')))
  local link = T.dir .. '/link.sock'
  vim.loop.fs_symlink(T.dir .. '/harness.lua', link)
  T.check('link_refused', paths.check_socket_file(link) or vim.NIL)
  T.check('own_file', paths.check_socket_file(T.dir .. '/harness.lua') or 'ok')

  -- inbox prompts: what each schema's answers become
  local inbox = require('pokeralph.inbox')
  local answers = {}
  local function ask(schema, selects, inputs)
    vim.list_extend(T.selects, selects or {})
    vim.list_extend(T.inputs, inputs or {})
    local result = 'pending'
    inbox.ask(schema, 'Title', function(values)
      result = values == nil and 'cancelled' or values
    end)
    T.wait('an answer', 2000, function()
      return result ~= 'pending'
    end)
    answers[#answers + 1] = result
  end
  local function pick(n)
    return function()
      return n
    end
  end
  local function typed(text)
    return function()
      return text
    end
  end
  ask({ type = 'confirm' }, { pick(1) })
  ask({ type = 'confirm' }, { pick(nil) }) -- <Esc>
  ask({ type = 'select', options = { 'a', 'b', 'c' }, multiple = true }, {}, { typed('3, 1') })
  ask({ type = 'rating', max = 5 }, { pick(4) })
  ask({ type = 'rating', max = 50 }, {}, { typed('42') })
  ask({
    type = 'form',
    fields = {
      { name = 'n', type = 'number' },
      { name = 'pick', type = 'select', options = { 'x', 'y' } },
      { name = 'ok', type = 'checkbox' },
      { name = 'skip', type = 'text' },
    },
  }, { pick(2), pick(1) }, { typed('2.5'), typed('') })
  ask({ type = 'form', fields = { { name = 't', type = 'text' } } }, {}, { typed('') })
  T.check('answers', answers)
end)
