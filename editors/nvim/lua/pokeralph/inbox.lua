-- Answering inbox items in the editor: the prompts are generated from each item's
-- feedback schema (confirm, select, form fields, rating) with vim.ui.select and
-- vim.ui.input, so any UI plugin that replaces those serves them. The daemon validates
-- the answer (inbox.answer); when it refuses, its error is shown and the questions are
-- asked again. Cancelling a prompt (<Esc>) leaves the item unanswered.
local client = require('pokeralph.client')
local util = require('pokeralph.util')

local M = {}

local INVALID_ANSWER = -32020
local INVALID_PARAMS = -32602

local function select(items, opts, cb)
  vim.ui.select(items, opts, function(choice, idx)
    vim.schedule(function()
      cb(choice, idx)
    end)
  end)
end

local function input(opts, cb)
  vim.ui.input(opts, function(text)
    vim.schedule(function()
      cb(text)
    end)
  end)
end

local function number(text)
  local n = tonumber(vim.trim(text))
  if n ~= nil and n == math.floor(n) and math.abs(n) < 2 ^ 53 then
    return math.floor(n)
  end
  return n or text -- not a number: sent as is, and the daemon says what it wants
end

-- Split "1, 3" or "a,b" into the chosen options (a number picks by position).
local function picks(text, options)
  local out = {}
  for token in tostring(text):gmatch('[^,]+') do
    token = vim.trim(token)
    local n = tonumber(token)
    if n ~= nil and options[n] ~= nil then
      out[#out + 1] = options[n]
    elseif token ~= '' then
      out[#out + 1] = token
    end
  end
  return out
end

local function ask_field(field, cb)
  local label = util.clean(util.val(field.label) ~= nil and field.label ~= '' and field.label or field.name)
  local required = field.required == true
  local kind = field.type
  if kind == 'select' or kind == 'checkbox' then
    local options = kind == 'select' and vim.deepcopy(util.val(field.options) or {}) or { 'yes', 'no' }
    local skip = not required and '(leave empty)' or nil
    local shown = vim.deepcopy(options)
    if skip then
      shown[#shown + 1] = skip
    end
    select(shown, { prompt = label .. (required and ' *' or '') }, function(choice, idx)
      if choice == nil then
        return cb(nil, true)
      end
      if choice == skip and idx == #shown then
        return cb(nil)
      end
      if kind == 'checkbox' then
        return cb(idx == 1)
      end
      cb(choice)
    end)
    return
  end
  local placeholder = util.val(field.placeholder)
  input({
    prompt = label .. (required and ' *' or '') .. (placeholder and (' (' .. util.clean(placeholder) .. ')') or '') .. ': ',
  }, function(text)
    if text == nil then
      return cb(nil, true)
    end
    if text == '' then
      return cb(nil)
    end
    if kind == 'number' then
      return cb(number(text))
    end
    cb(text)
  end)
end

--- Ask for an answer fitting `schema`; `cb(values)` (nil when the person cancelled).
function M.ask(schema, title, cb)
  local kind = schema.type
  local prompt = util.clean(util.val(schema.prompt) or '')
  if title ~= nil and title ~= '' then
    prompt = util.clean(title) .. (prompt ~= '' and (' — ' .. prompt) or '')
  end
  if kind == 'confirm' then
    local yes = util.clean(util.val(schema.confirmLabel) or 'Confirm')
    local no = util.clean(util.val(schema.cancelLabel) or 'Cancel')
    select({ yes, no }, { prompt = prompt }, function(choice, idx)
      if choice == nil then
        return cb(nil)
      end
      cb({ value = idx == 1 })
    end)
  elseif kind == 'select' then
    local options = util.val(schema.options) or {}
    if schema.multiple == true then
      local listed = {}
      for i, option in ipairs(options) do
        listed[#listed + 1] = ('%d. %s'):format(i, util.clean(option))
      end
      input({ prompt = prompt .. ' [' .. table.concat(listed, ', ') .. '] (numbers, comma-separated): ' }, function(text)
        if text == nil then
          return cb(nil)
        end
        cb({ value = picks(text, options) })
      end)
    else
      select(options, { prompt = prompt, format_item = util.clean }, function(choice)
        if choice == nil then
          return cb(nil)
        end
        cb({ value = choice })
      end)
    end
  elseif kind == 'rating' then
    local max = tonumber(util.val(schema.max)) or 5
    if max <= 10 then
      local options = {}
      for i = 1, max do
        options[i] = tostring(i)
      end
      select(options, { prompt = prompt .. (' (1-%d)'):format(max) }, function(_, idx)
        if idx == nil then
          return cb(nil)
        end
        cb({ value = idx })
      end)
    else
      input({ prompt = prompt .. (' (1-%d): '):format(max) }, function(text)
        if text == nil then
          return cb(nil)
        end
        cb({ value = number(text) })
      end)
    end
  elseif kind == 'form' then
    local fields = util.val(schema.fields) or {}
    local values = {}
    local i = 0
    local function next_field()
      i = i + 1
      local field = fields[i]
      if field == nil then
        cb({ values = next(values) ~= nil and values or vim.empty_dict() })
        return
      end
      ask_field(field, function(value, cancelled)
        if cancelled then
          return cb(nil)
        end
        if value ~= nil then
          values[field.name] = value
        end
        next_field()
      end)
    end
    if prompt ~= '' then
      util.notify(prompt)
    end
    next_field()
  else
    util.error('this item asks for an answer of an unknown kind: ' .. tostring(kind))
    cb(nil)
  end
end

--- Show the item and ask until the daemon takes the answer (or the person cancels);
--- `done(ok)` runs at the end.
function M.answer(id, repo, done)
  done = done or function() end
  client.request('inbox.get', { id = id, repo = repo }, function(err, item)
    if err ~= nil then
      util.error(util.describe_error(err))
      return done(false)
    end
    local delivery = item.delivery
    local schema = util.val(delivery.feedbackSchema)
    if schema == nil then
      util.notify(('%s is passive: it takes no answer'):format(id))
      return done(false)
    end
    if util.val(delivery.status) == 'completed' then
      util.notify(('%s is answered already'):format(id))
      return done(false)
    end
    local repo_name = util.val(item.repo) or repo
    local content = util.val(delivery.content)
    local body = content and util.val(content.body) or ''
    if body ~= '' then
      local buf = util.scratch('pokeralph://inbox/' .. id, 'markdown')
      local lines = { '# ' .. util.clean(delivery.title), '' }
      vim.list_extend(lines, util.lines(body))
      util.set_lines(buf, lines)
    end
    local function ask()
      M.ask(schema, delivery.title, function(values)
        if values == nil then
          util.notify(('%s not answered'):format(id))
          return done(false)
        end
        client.request('inbox.answer', { id = id, values = values, repo = repo_name }, function(aerr)
          if aerr ~= nil and (aerr.code == INVALID_ANSWER or aerr.code == INVALID_PARAMS) then
            util.error(util.describe_error(aerr) .. '; asking again')
            return ask()
          end
          if aerr ~= nil then
            util.error(util.describe_error(aerr))
            return done(false)
          end
          util.notify(('answered %s'):format(id))
          done(true)
        end)
      end)
    end
    ask()
  end)
end

--- Pick one of the open items (across every repository) and answer it.
function M.pick(done)
  done = done or function() end
  client.request('inbox.list', { status = 'open' }, function(err, result)
    if err ~= nil then
      util.error(util.describe_error(err))
      return done(false)
    end
    local items = result.items or {}
    if #items == 0 then
      util.notify('nothing waits for you')
      return done(false)
    end
    select(items, {
      prompt = 'Answer which item?',
      format_item = function(item)
        return util.clean(('[%s] %s (%s)'):format(item.repo, item.title, item.mode))
      end,
    }, function(item)
      if item == nil then
        return done(false)
      end
      M.answer(item.id, item.repo, done)
    end)
  end)
end

return M
