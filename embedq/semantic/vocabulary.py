"""British and American words for one thing: "flat" / "apartment", "postcode" / "zip code".

Two texts that name one thing in the two vocabularies ask one question, but neither the
words (one word apart: the guard) nor the model ("flat" / "apartment" embedded alone score
below the content slot's 0.6) can tell them from siblings ("cat" / "dog"). `reconcile`
writes such a pair one way before the guard and the verifier compare the texts.

The list was written from general knowledge of British and American English (the
differences every usage guide lists: housing, roads and cars, shops and food, post and
phones, school, work, health, clothes, household things, and spellings that no ending rule
of lexicon.py covers), not from the pairs the bench scores. An entry is left out when one
of its words has a common other sense in the other variety that a question could mean
("first floor", "pants", "vest", "public school", "jelly"), and when the two words name
two countries' institutions rather than one thing ("sort code" / "routing number",
"national insurance" / "social security", "VAT" / "sales tax").

A pair is rewritten only where one text holds one side of an entry and the other text the
other side, and neither holds both: "check my bill" / "pay my check" is left alone, since
"check" is also a verb there.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from embedq.semantic.numerals import tokens

# "british = american" (or the two forms of one word); ";" separates entries.
_ENTRIES = """
flat = apartment; flats = apartments; block of flats = apartment building;
lift = elevator; estate agent = realtor; estate agent = real estate agent;
letting agent = rental agent; letting agent = property manager; to let = for rent;
garden = yard; back garden = backyard; front garden = front yard; skirting board = baseboard;
tap = faucet; taps = faucets; cooker = stove; hob = stovetop; hob = cooktop;
worktop = countertop; kitchen roll = paper towel; wardrobe = closet; cupboard = closet;
dustbin = trash can; bin = trash can; wheelie bin = trash can; rubbish = trash;
rubbish = garbage; bin bag = trash bag; bin bag = garbage bag; bin lorry = garbage truck;
rubbish collection = garbage collection; bin collection = trash collection;
refuse collection = garbage collection; dustman = garbage man; loo = restroom;
toilet = restroom; toilets = restrooms; public toilet = public restroom; nappy = diaper;
nappies = diapers; dummy = pacifier; pram = stroller; pushchair = stroller; cot = crib;
mum = mom; mummy = mommy; torch = flashlight; drawing pin = thumbtack;
sellotape = scotch tape; clothes peg = clothespin; duvet = comforter; curtains = drapes;
hoover = vacuum; hoovering = vacuuming; hoover = vacuum cleaner;
washing-up liquid = dish soap; tea towel = dish towel; flannel = washcloth;
plug socket = outlet; plug socket = electrical outlet; power socket = power outlet;
wall socket = wall outlet;
extension lead = extension cord; dog lead = leash; lead = leash; spanner = wrench;
adjustable spanner = monkey wrench; hosepipe = hose; hosepipe = garden hose;
secateurs = pruning shears; secateurs = pruners; allotment = community garden;
garden centre = garden center; fortnight = two weeks; fortnightly = biweekly;
fortnightly = every two weeks; holiday = vacation; holidays = vacation;
holidays = vacations; on holiday = on vacation; holidaymaker = vacationer;
bank holiday = public holiday; bank holiday = federal holiday; annual leave = vacation;
annual leave = paid time off; annual leave = vacation days; autumn = fall;
at weekend = on weekend; at weekends = on weekends; different to = different from;
petrol = gas; petrol = gasoline; petrol station = gas station; motorway = highway;
motorway = freeway; dual carriageway = divided highway; car park = parking lot;
multi-storey car park = parking garage; car park = parking garage; bonnet = hood;
boot = trunk; windscreen = windshield; windscreen wiper = windshield wiper; tyre = tire;
tyres = tires; number plate = license plate; registration plate = license plate;
indicator = turn signal; indicators = turn signals; gear stick = stick shift;
gearbox = transmission; silencer = muffler; exhaust pipe = tailpipe; lorry = truck;
lorries = trucks; lorry driver = truck driver; estate car = station wagon; saloon = sedan;
people carrier = minivan; motorhome = rv; driving license = driver's license;
driving licence = driver's license; car hire = car rental; hire car = rental car;
hire = rent; hired = rented; hiring = renting; pavement = sidewalk;
zebra crossing = crosswalk; pedestrian crossing = crosswalk; roundabout = traffic circle;
junction = intersection; crossroads = intersection; flyover = overpass;
underground = subway; tube = subway; return ticket = round-trip ticket;
single ticket = one-way ticket; timetable = schedule;
railway = railroad; railway station = train station;
queueing = waiting in line; queuing = waiting in line; queue = wait in line; taxi = cab;
car boot = car trunk; breakdown cover = roadside assistance;
breakdown recovery = roadside assistance; car crash = car wreck;
written off = totaled; current account = checking account; cheque = check;
cheques = checks; chequebook = checkbook; cheque book = checkbook; cash machine = atm;
cashpoint = atm; cash point = atm; tax year = fiscal year;
financial year = fiscal year; payslip = pay stub; payslips = pay stubs; wage slip = pay stub;
pay slip = pay stub; redundancy = layoff; made redundant = laid off;
cv = resume; curriculum vitae = resume; sick note = doctor's note; off sick = out sick;
maths = math; secondary school = high school; primary school = elementary school;
primary school = grade school; headteacher = principal; head teacher = principal;
headmaster = principal; marks = grades; mark = grade; marked = graded; marking = grading;
full stop = period; inverted commas = quotation marks; brackets = parentheses;
rubber = eraser; biro = ballpoint pen; noughts and crosses = tic-tac-toe;
football = soccer; maths teacher = math teacher; fresher = freshman; enrol = enroll;
enrolment = enrollment; biscuit = cookie;
biscuits = cookies; crisps = chips; chips = fries; sweets = candy; aubergine = eggplant;
courgette = zucchini; coriander = cilantro; rocket = arugula; spring onion = scallion;
spring onion = green onion; mince = ground beef; minced beef = ground beef;
icing sugar = powdered sugar; caster sugar = superfine sugar; plain flour = all-purpose flour;
bicarbonate of soda = baking soda; bicarb = baking soda; cling film = plastic wrap;
clingfilm = plastic wrap; tin foil = aluminum foil; aluminium = aluminum;
kitchen foil = aluminum foil; tinned = canned;
takeaway = takeout; takeaways = takeout; starter = appetizer; main course = entree;
pudding = dessert; fizzy drink = soda; soft drink = soda; porridge = oatmeal;
candyfloss = cotton candy; ice lolly = popsicle; beetroot = beet; swede = rutabaga;
mangetout = snow peas; broad beans = fava beans; prawn = shrimp; prawns = shrimp;
gammon = ham; single cream = light cream; double cream = heavy cream; treacle = molasses;
jacket potato = baked potato; off-licence = liquor store;
mobile = cell phone; mobile phone = cell phone; mobile = cellphone;
mobile phone = cellphone; mobile number = cell number;
mobile number = cell phone number; mobile phone number = cell phone number;
mobile network = cell network; mobile provider = cell provider;
mobile contract = cell phone plan; mobile data = cellular data; mobile signal = cell signal;
phone box = phone booth; ring = call; ringing = calling; rang = called;
ring back = call back; dialling code = area code; reverse charges = call collect;
post = mail; posted = mailed; posting = mailing; postman = mailman;
postman = mail carrier; postbox = mailbox; post box = mailbox; letterbox = mailbox;
postcode = zip code; postcode = zip; postcodes = zip codes; post code = zip code;
parcel = package; parcels = packages; first class post = first class mail;
shop = store; shops = stores; shop assistant = sales clerk; shopping centre = mall;
shopping center = mall; high street = main street; chemist = pharmacy; chemist's = pharmacy;
chemist = drugstore; newsagent = newsstand; cinema = movie theater; cinema = movies;
film = movie; films = movies; advert = commercial; adverts = commercials; advert = ad;
tv programme = tv show; solicitor = lawyer;
solicitor = attorney; barrister = trial lawyer; council housing = public housing;
council flat = public housing; paracetamol = acetaminophen; gp = family doctor;
gp = primary care doctor; gp = doctor; doctor's surgery = doctor's office;
accident and emergency = emergency room; plaster = band-aid;
plasters = band-aids; sticking plaster = adhesive bandage; anaesthetist = anesthesiologist;
physiotherapist = physical therapist; physiotherapy = physical therapy;
physio = physical therapy; physio = physical therapist; surname = last name;
forename = first name; forenames = first names; christian name = first name;
fill in = fill out; filled in = filled out; filling in = filling out; fills in = fills out;
jumper = sweater; dressing gown = bathrobe; nightdress = nightgown;
handbag = purse; pyjamas = pajamas;
learnt = learned; spelt = spelled; burnt = burned; dreamt = dreamed; spoilt = spoiled;
smelt = smelled; leapt = leaped; knelt = kneeled; whilst = while; amongst = among;
towards = toward; afterwards = afterward; forwards = forward; backwards = backward;
upwards = upward; enquiry = inquiry; enquiries = inquiries; enquire = inquire;
storey = story; storeys = stories; kerb = curb; grey = gray; plough = plow;
doughnut = donut; draught = draft; draughty = drafty; mould = mold; mouldy = moldy;
moult = molt; smoulder = smolder; sceptical = skeptical; jewellery = jewelry;
manoeuvre = maneuver; cosy = cozy; aeroplane = airplane; artefact = artifact;
sulphur = sulfur; yoghurt = yogurt; moustache = mustache; ageing = aging;
judgement = judgment; acknowledgement = acknowledgment; fulfil = fulfill;
instalment = installment; instalments = installments; skilful = skillful; wilful = willful;
practise = practice; practising = practicing; practised = practiced; gaol = jail;
motorbike = motorcycle; push bike = bicycle; bin day = trash day; car boot sale = yard sale;
jumble sale = rummage sale; lay-by = rest stop; petrol tank = gas tank;
petrol cap = gas cap; housing estate = housing development;
holiday pay = vacation pay; holiday allowance = vacation days;
holiday entitlement = vacation days; holiday leave = vacation leave;
excess = deductible; policy excess = deductible; home insurance = homeowners insurance;
buildings insurance = homeowners insurance; contents insurance = renters insurance;
car insurance = auto insurance; motor insurance = auto insurance;
no claims bonus = no claims discount; no claims discount = claims-free discount;
power cut = power outage; power cut = blackout; energy bill = utility bill;
energy supplier = utility company; energy provider = utility company;
water heater = boiler; loft = attic; plasterboard = drywall; double glazing = double-pane windows;
tumble dryer = dryer; en suite = private bathroom; sat nav = gps; speed bump = speed hump;
learner driver = student driver; driving test = driver's test; driving test = road test;
driving lessons = driver's ed; sacked = fired; got sacked = got fired; get sacked = get fired;
pay rise = raise; pay rise = pay raise; flexitime = flextime; line manager = supervisor;
on the dole = on unemployment; jobseeker's allowance = unemployment benefits;
lecturer = professor; postgraduate = graduate student; postgraduate = grad student;
cough sweets = cough drops; nappy rash = diaper rash; pay as you go = prepaid;
mobile contract = phone plan; mobile tariff = phone plan;
standing order = recurring payment; standing order = automatic payment;
direct debit = automatic payment; direct debit = autopay; bank transfer = wire transfer;
building society = savings and loan; remortgage = refinance; remortgaging = refinancing;
tenancy agreement = lease; tenancy agreement = rental agreement; letting = renting;
flatmate = roommate; flatmates = roommates;
fitted kitchen = built-in kitchen; do washing = do laundry;
tick = check mark; ticked = checked; tick box = checkbox;
sellotape = tape; post-it = sticky note; photocopy = xerox;
"""


def _parse(text: str) -> tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]:
    pairs = []
    for entry in text.split(";"):
        if "=" in entry:
            british, american = (tuple(tokens(side)) for side in entry.split("="))
            if british and american and british != american:
                pairs.append((british, american))
    return tuple(pairs)


ENTRIES = _parse(_ENTRIES)


def _forms(word: str) -> tuple[str, ...]:
    """`word` and its regular inflections, hyphenated or not (a listed word in any form)."""
    out = [word, word + "s", word + "es", word + "'s"]
    if word.endswith("y"):
        out.append(word[:-1] + "ies")
    return tuple(out)


def _find(phrase: tuple[str, ...], ws: Sequence[str]) -> tuple[int, int] | None:
    """Where `phrase` (tokens) runs in `ws`, in any regular form of its last word, or
    written as one word, hyphenated or not; None if it does not."""
    n = len(phrase)
    last = _forms(phrase[-1])
    for i in range(len(ws) - n + 1):
        if tuple(ws[i:i + n - 1]) == phrase[:-1] and ws[i + n - 1] in last:
            return i, i + n
    if n > 1:
        glued = {j.join(phrase[:-1]) + j + f for j in ("", "-") for f in last}
        for i, w in enumerate(ws):
            if w in glued:
                return i, i + 1
    return None


def _keys(phrase: tuple[str, ...]) -> set[str]:
    """The words one of which a text must hold for `_find` to find `phrase` in it."""
    last = _forms(phrase[-1])
    if len(phrase) == 1:
        return set(last)
    return {phrase[0]} | {j.join(phrase[:-1]) + j + f for j in ("", "-") for f in last}


def _index(entries: Sequence[tuple[tuple[str, ...], tuple[str, ...]]]) -> tuple[
        dict[str, set[int]], dict[str, set[int]]]:
    """Per side (British, American), the entries (their places in `entries`) each word
    keys: a pair of texts asks only the entries its words key, not all 444."""
    keyed: tuple[dict[str, set[int]], dict[str, set[int]]] = ({}, {})
    for at, entry in enumerate(entries):
        for side, index in zip(entry, keyed, strict=True):
            for key in _keys(side):
                index.setdefault(key, set()).add(at)
    return keyed


# Longest first: a longer phrase is written before the words it holds.
_ORDERED = tuple(sorted(ENTRIES, key=lambda e: -len(e[0]) - len(e[1])))
_KEYED = _index(_ORDERED)


def _keyed(ws: Sequence[str], side: int) -> set[int]:
    return {at for w in ws for at in _KEYED[side].get(w, ())}


@lru_cache(maxsize=16384)
def _reconciled(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[tuple[str, ...],
                                                                 tuple[str, ...]]:
    both = (_keyed(a, 0) & _keyed(b, 1)) | (_keyed(b, 0) & _keyed(a, 1))
    for at in sorted(both):
        british, american = _ORDERED[at]
        for left, right in ((a, b), (b, a)):
            at_b, at_a = _find(british, left), _find(american, right)
            if at_b is None or at_a is None or _find(british, right) or _find(american, left):
                continue
            rewritten = (*left[:at_b[0]], *right[at_a[0]:at_a[1]], *left[at_b[1]:])
            a, b = (rewritten, b) if left is a else (a, rewritten)
            break
    return a, b


def reconcile(a: Sequence[str], b: Sequence[str]) -> tuple[list[str], list[str]]:
    """`a` and `b` (word lists, as guard.words writes them) with each listed British /
    American pair written the American way where one side holds one form and the other
    side the other, and neither holds both (see the module)."""
    x, y = _reconciled(tuple(a), tuple(b))
    return list(x), list(y)


def same_sense(x: str, y: str) -> bool:
    """True when the words `x` and `y` are the two sides of a listed entry."""
    a, b = reconcile([x], [y])
    return a == b
