"""What the people of bench/recall_sets.py talk about: names, jobs, hobbies, pets, trips, purchases,
family news, and the small talk around them (pure data).

Written so that questions rarely copy a turn's words: a hobby's turns never say its category
("sports", "instrument", "craft"), a purchase's object is named only in its photo caption, and a
trip's highlight does not repeat the destination. Placeholders in braces are filled per person:
{place}, {name}, {sib}, {desc}, {subj} (she/he/they), {obj}, {pos} (her/his/their).
"""

from __future__ import annotations

from dataclasses import dataclass

SPEAKER_NAMES = tuple(
    "Maya Leo Priya Tomas Aisha Jonah Sofia Mateo Hana Ravi Chloe Malik Ingrid Diego Yuki Noor Felix "
    "Amara Oscar Lena Kofi Elena Zara Marcus Ines Theo Layla Nikolai Rosa Caleb Mei Omar Freya Andre "
    "Camila Gideon".split()
)
RELATIVE_NAMES = tuple(
    "Daniel Grace Ethan Lucy Nadia Victor Ruby Hugo Alma Jasper Clara Milo Iris Pablo Nina Arjun Bea "
    "Tariq Selma Rowan Esme Idris Vera Callum".split()
)
PET_NAMES = tuple(
    "Biscuit Pepper Mochi Rufus Luna Ziggy Olive Bruno Clementine Noodle Waffles Juniper Pickles Hazel "
    "Otis Sprout Tofu Marble".split()
)
PRONOUNS = {  # subject, object, possessive
    "she": ("she", "her", "her"),
    "he": ("he", "him", "his"),
    "they": ("they", "them", "their"),
}


@dataclass(frozen=True)
class Job:
    title: str  # "an ER nurse"
    workplace: str  # "at St. Mary's"
    field: str  # what an open-domain question calls the field ("healthcare")
    promotion: str  # the title a promotion gives
    days: tuple[str, ...]  # small talk about a day at work


JOBS = (
    Job(
        "an ER nurse",
        "at St. Mary's downtown",
        "healthcare",
        "charge nurse",
        ("Three night shifts in a row, I'm a zombie.", "We had a full waiting room all weekend."),
    ),
    Job(
        "a high school chemistry teacher",
        "at Westbrook High",
        "education",
        "head of the science department",
        ("Grading forty lab reports tonight, send help.", "My students set off the smoke alarm again."),
    ),
    Job(
        "a pastry chef",
        "at a little French bakery on Elm Street",
        "food",
        "head pastry chef",
        ("I was up at 4 am laminating dough.", "We sold out of croissants by nine."),
    ),
    Job(
        "a software engineer",
        "at a fintech startup",
        "tech",
        "tech lead",
        ("Spent all day chasing one bug.", "Our deploy broke at 5 pm on a Friday, classic."),
    ),
    Job(
        "a landscape architect",
        "at a small design studio",
        "design",
        "senior designer",
        ("Walked a muddy site in the rain all morning.", "Client wants the park redesigned, again."),
    ),
    Job(
        "a firefighter",
        "at Station 12",
        "public service",
        "lieutenant",
        ("Long shift, two kitchen fires and a cat in a tree.", "We did hose drills all afternoon."),
    ),
    Job(
        "a veterinary technician",
        "at an animal hospital near the park",
        "animal care",
        "lead technician",
        ("A golden retriever ate a whole birthday cake today.", "Clipped about fifty nails this morning."),
    ),
    Job(
        "an accountant",
        "at a mid-size firm downtown",
        "finance",
        "senior manager",
        ("Tax season is eating me alive.", "Spreadsheets until my eyes crossed."),
    ),
    Job(
        "an electrician",
        "for a family-run contractor",
        "the trades",
        "site supervisor",
        ("Rewired an old farmhouse all week.", "Crawled through three attics today."),
    ),
    Job(
        "a librarian",
        "at the central public library",
        "education",
        "branch manager",
        ("Story time with twenty toddlers, I need a nap.", "Someone returned a book from 1987!"),
    ),
    Job(
        "a physical therapist",
        "at a sports clinic",
        "healthcare",
        "clinic director",
        ("Back-to-back patients, no lunch.", "Helped a runner walk without crutches today."),
    ),
    Job(
        "a pilot",
        "for a regional airline",
        "aviation",
        "captain",
        ("Four flights today and a delay in every one.", "Landed in a crosswind this morning, my hands were shaking."),
    ),
)


@dataclass(frozen=True)
class Hobby:
    key: str  # a short name, for picking: "surfing"
    category: str  # a key of CATEGORY_QUESTIONS
    places: tuple[str, ...]
    intros: tuple[str, ...]  # the first mention; {place}
    place_questions: tuple[str, ...]  # single-hop, answered by the intro's place; {P}
    start_questions: tuple[str, ...]  # temporal, answered by the intro's session date; {P}
    updates: tuple[str, ...]  # later mentions
    captions: tuple[str, ...]  # a photo shared with an update
    caption_questions: tuple[str, ...]  # single-hop, answered by the caption only, one per caption in order; {P}


HOBBIES = (
    Hobby(
        "surfing",
        "sports",
        ("Ocean Beach", "Pleasure Point", "Cocoa Beach", "Linda Mar"),
        (
            "I finally signed up for surf lessons at {place}! Stood up on the board on my third try.",
            "So I've been getting up at dawn to catch waves at {place} before work.",
        ),
        (
            "At which beach did {P} learn to ride waves?",
            "Where does {P} go out on the board?",
            "Where does {P} take surf lessons?",
        ),
        ("When did {P} take up surfing?", "When did {P} start riding waves?"),
        (
            "Caught the best wave of my life this morning.",
            "Wiped out so many times today, my shoulders are done.",
            "The swell was way too big for me this weekend, I just watched from the sand.",
        ),
        ("a bright yellow longboard leaning against a wooden beach hut", "a wetsuit drying on a fence by the dunes"),
        ("What colour is the board {P} showed in a photo?", "What was drying by the dunes in {P}'s picture?"),
    ),
    Hobby(
        "bouldering",
        "sports",
        ("Crux Climbing Gym", "the Granite Yard"),
        (
            "A friend dragged me to {place} and now I'm hooked on bouldering.",
            "I've been going to {place} three nights a week to climb, my forearms are on fire.",
        ),
        (
            "Which gym does {P} climb at?",
            "Where does {P} go to climb walls?",
            "Where did {P} get hooked on bouldering?",
        ),
        ("When did {P} get into climbing?", "When did {P} start bouldering?"),
        (
            "Sent my first V4 last night!!",
            "Tore a callus on the crimpy wall, ouch.",
            "Chalk everywhere, I'm finding it in my hair days later.",
        ),
        ("chalky hands gripping a purple hold on an overhanging wall", "a pair of worn-out red climbing shoes"),
        ("What colour was the hold in {P}'s climbing photo?", "What did {P} show worn out in a picture?"),
    ),
    Hobby(
        "tennis",
        "sports",
        ("the courts at Riverside Park", "the Northside club"),
        ("I joined a beginners' tennis league at {place}.", "Been hitting tennis balls at {place} every Sunday."),
        (
            "Where does {P} play tennis?",
            "Which courts does {P} use for the league?",
            "Where does {P}'s tennis league play?",
        ),
        ("When did {P} join a tennis league?", "When did {P} start playing tennis?"),
        (
            "Won my first match 6-4 in the third set!",
            "My backhand is still a disaster honestly.",
            "Lost in the quarterfinals but it was close.",
        ),
        ("a tennis racket with a cracked frame lying on a clay court", "a trophy shaped like a tiny silver racket"),
        ("What happened to the racket in {P}'s photo?", "What trophy did {P} show off?"),
    ),
    Hobby(
        "trail running",
        "sports",
        ("the ridge trail above town", "Muir Woods", "the canyon loop"),
        (
            "I started trail running on {place}, hills are brutal but the views are worth it.",
            "I've been training on {place} for a half marathon in the hills.",
        ),
        ("Where does {P} go running on trails?", "Which route does {P} train on?", "Where does {P} go trail running?"),
        ("When did {P} begin trail running?", "When did {P} start training on trails?"),
        (
            "Did 15 miles this weekend, my legs are jelly.",
            "Rolled my ankle on a root, nothing serious.",
            "Finished the half marathon in 2 hours 10!",
        ),
        ("muddy trail shoes next to a finisher medal", "a misty forest path with ferns on both sides"),
        ("What was next to the muddy shoes in {P}'s picture?", "What did the path in {P}'s photo look like?"),
    ),
    Hobby(
        "road cycling",
        "sports",
        ("the coast road", "the lake loop"),
        (
            "Bought a used road bike and I've been riding {place} on weekends.",
            "I'm doing long rides along {place} now, 60 miles last Saturday.",
        ),
        (
            "Where does {P} ride the bike?",
            "Which route does {P} cycle on weekends?",
            "Where does {P} ride on weekends?",
        ),
        ("When did {P} get into cycling?", "When did {P} start the long weekend rides?"),
        (
            "Got a flat tire 20 miles from home, fun times.",
            "Joined a group ride, they dropped me on the first hill.",
            "Did my first century ride!",
        ),
        ("a teal road bike leaning on a stone wall overlooking the sea", "a bike computer showing 100.4 miles"),
        ("What colour is {P}'s bike?", "What distance did {P}'s bike computer show?"),
    ),
    Hobby(
        "swimming",
        "sports",
        ("the community pool", "the lido on Park Lane"),
        ("I've started swimming laps at {place} before work.", "Joined a masters swim group at {place}."),
        ("Where does {P} swim?", "Which pool does {P} go to?", "Where does {P} swim laps before work?"),
        ("When did {P} start swimming laps?", "When did {P} join the swim group?"),
        (
            "Finally swam a full mile without stopping.",
            "Butterfly is humbling, I look like a drowning moth.",
            "Open-water swim in the lake this weekend, it was freezing.",
        ),
        ("a pair of blue goggles on the edge of an empty pool", "a swim cap covered in tiny cartoon sharks"),
        ("What did {P} photograph at the edge of the pool?", "What was on {P}'s swim cap?"),
    ),
    Hobby(
        "guitar",
        "music",
        ("a shop on Main Street", "an online course", "a teacher down the road"),
        (
            "I bought an acoustic guitar and I'm taking lessons from {place}.",
            "Started learning guitar through {place}, my fingertips hate me.",
        ),
        ("Where is {P} learning to strum?", "Who or what is teaching {P} the guitar?", "Who gives {P} guitar lessons?"),
        ("When did {P} pick up the guitar?", "When did {P} start taking guitar lessons?"),
        (
            "I can finally play the F chord cleanly!",
            "Played a song at open mic night, I was shaking.",
            "Learning fingerpicking now, it's so hard.",
        ),
        ("a sunburst acoustic guitar on a stand next to a fern", "a hand-written chord chart taped to a wall"),
        ("What colour finish does {P}'s guitar have?", "What was taped to {P}'s wall?"),
    ),
    Hobby(
        "cello",
        "music",
        ("a retired symphony player", "the community music school"),
        (
            "I'm learning the cello! Lessons with {place} on Thursdays.",
            "I rented a cello and signed up for lessons at {place}.",
        ),
        ("Who gives {P} cello lessons?", "Where is {P} learning the cello?", "Who teaches {P} the cello on Thursdays?"),
        ("When did {P} start the cello?", "When did {P} begin lessons for the cello?"),
        (
            "Played my first piece at the student recital.",
            "My bow hold is finally not a claw.",
            "Practiced scales for an hour, my neighbours must love me.",
        ),
        ("a cello case covered in travel stickers", "sheet music of a Bach suite on a music stand"),
        ("What covers {P}'s cello case?", "Whose piece was on {P}'s music stand?"),
    ),
    Hobby(
        "piano",
        "music",
        ("an app", "my old childhood teacher"),
        ("I bought a digital piano and I'm relearning with {place}.", "Started piano lessons again with {place}."),
        (
            "How is {P} relearning the piano?",
            "Who is helping {P} with the keys again?",
            "How is {P} relearning the piano?",
        ),
        ("When did {P} get back into piano?", "When did {P} buy the digital keyboard?"),
        (
            "I can play Clair de Lune now, slowly.",
            "My left hand refuses to cooperate.",
            "Played for my grandma on her visit, she cried.",
        ),
        ("a black upright piano with a vase of tulips on top", "sheet music with lots of pencil markings"),
        ("What was on top of {P}'s piano?", "What was on the sheet music {P} shared?"),
    ),
    Hobby(
        "drums",
        "music",
        ("a tiny rehearsal room downtown", "my garage"),
        (
            "I joined a garage band, I play drums, we practice in {place}.",
            "Bought an electronic drum kit and set it up in {place}.",
        ),
        ("Where does {P}'s band rehearse?", "Where did {P} set up the kit?", "Where does {P}'s garage band practice?"),
        ("When did {P} start drumming?", "When did {P} join the band?"),
        (
            "We played our first gig at a bar, twelve people came!",
            "Broke a stick mid-song, kept going.",
            "Learning a new groove in 7/8, my brain hurts.",
        ),
        ("a red drum kit squeezed into a small garage", "a flyer for a band called The Paper Cranes"),
        ("What colour is the kit in {P}'s photo?", "What is the name of the band on {P}'s flyer?"),
    ),
    Hobby(
        "pottery",
        "arts and crafts",
        ("a studio on 5th Avenue", "the community arts centre"),
        (
            "I signed up for a wheel-throwing class at {place}.",
            "I've been spending my evenings throwing clay at {place}.",
        ),
        (
            "Where does {P} take classes at the wheel?",
            "Where does {P} throw clay?",
            "Where does {P} take the wheel-throwing class?",
        ),
        ("When did {P} start pottery?", "When did {P} sign up for the wheel class?"),
        (
            "Made my first bowl that doesn't wobble!",
            "Everything I made cracked in the kiln, ugh.",
            "Glazed a whole set of mugs this week.",
        ),
        ("four lopsided speckled mugs drying on a shelf", "a blue-glazed bowl with a thumbprint on the rim"),
        ("What did {P} make that is drying on a shelf?", "What colour glaze did {P} use on the bowl?"),
    ),
    Hobby(
        "knitting",
        "arts and crafts",
        ("my neighbour", "a yarn shop on Oak Street"),
        ("I'm learning to knit! {place} is teaching me.", "Started knitting at a weekly circle at {place}."),
        ("Who is teaching {P} to knit?", "Where does {P} knit every week?", "Who is teaching {P} knitting?"),
        ("When did {P} start knitting?", "When did {P} begin going to the knitting circle?"),
        (
            "Finished my first scarf, it's very long and very crooked.",
            "Working on a sweater for my dad.",
            "Dropped a stitch and unravelled three rows.",
        ),
        ("a chunky mustard scarf wrapped around a cat", "half a green sweater on bamboo needles"),
        ("What was wrapped in {P}'s scarf in the photo?", "What colour is the sweater {P} is making?"),
    ),
    Hobby(
        "watercolor painting",
        "arts and crafts",
        ("a class at the library", "YouTube tutorials"),
        (
            "I've been painting with watercolors, learning from {place}.",
            "Picked up watercolors again thanks to {place}.",
        ),
        (
            "How is {P} learning watercolors?",
            "Where does {P} learn to paint?",
            "How is {P} learning to paint with watercolors?",
        ),
        ("When did {P} take up watercolors?", "When did {P} start painting again?"),
        ("Painted the view from my balcony.", "My skies keep turning muddy.", "Sold my first painting at a fair!"),
        ("a watercolor of a lighthouse on a cliff", "a palette with blobs of blue and orange paint"),
        ("What did {P} paint that stands on a cliff?", "Which colours were on {P}'s palette?"),
    ),
    Hobby(
        "woodworking",
        "arts and crafts",
        ("my dad's old workshop", "a makerspace downtown"),
        (
            "I've been doing woodworking at {place}, built a bookshelf already.",
            "Taking a woodworking course at {place}, I love the smell of sawdust.",
        ),
        ("Where does {P} do the woodwork?", "Where is {P} building furniture?", "Where does {P} do woodworking?"),
        ("When did {P} get into woodworking?", "When did {P} start building things from wood?"),
        (
            "Made a cutting board from walnut.",
            "Almost lost a finger, I'm fine, very careful now.",
            "Building a rocking chair for my sister's baby.",
        ),
        ("a walnut cutting board with a maple stripe", "a half-built rocking chair in a workshop"),
        ("What wood was the stripe in {P}'s cutting board?", "What was half-built in {P}'s workshop photo?"),
    ),
    Hobby(
        "sourdough baking",
        "cooking",
        ("a starter from my aunt", "a recipe from a baker friend"),
        ("I've been baking sourdough every weekend, using {place}.", "Got obsessed with bread, I use {place}."),
        (
            "Where did {P}'s starter come from?",
            "What does {P} use to make bread?",
            "What does {P} use to bake sourdough?",
        ),
        ("When did {P} start baking sourdough?", "When did {P} get into bread?"),
        (
            "My loaf finally has an open crumb!",
            "Forgot the starter for a week, it survived.",
            "Made cinnamon rolls with the discard.",
        ),
        ("a crusty round loaf with a wheat-ear score", "a jar of bubbly starter named Doughlores"),
        ("What pattern was scored on {P}'s loaf?", "What is the name of {P}'s jar of starter?"),
    ),
    Hobby(
        "chess",
        "games",
        ("the chess club at the library", "a park by my office"),
        (
            "I joined {place} for chess, I'm getting crushed by retirees.",
            "Been playing chess every lunch at {place} with the regulars.",
        ),
        ("Where does {P} play chess?", "Where does {P} meet other chess players?", "Where does {P} play chess?"),
        ("When did {P} start playing chess?", "When did {P} join the chess club?"),
        (
            "Beat the club champion! He was very gracious.",
            "Studying the Sicilian opening now.",
            "Lost on time with a winning position, painful.",
        ),
        ("a wooden chess board mid-match with a clock at 0:04", "a trophy of a knight piece"),
        ("How much time was left on the clock in {P}'s chess photo?", "What piece was {P}'s trophy shaped as?"),
    ),
    Hobby(
        "gardening",
        "gardening",
        ("my balcony", "a community plot by the river"),
        (
            "I'm growing tomatoes and herbs on {place} this year.",
            "Got a spot in {place} and planted peppers and beans.",
        ),
        ("Where does {P} grow vegetables?", "Where are {P}'s plants?", "Where is {P} growing tomatoes and herbs?"),
        ("When did {P} start the vegetable garden?", "When did {P} get the plot?"),
        ("Harvested my first tomatoes!", "Snails ate half my lettuce.", "My basil is taller than me now."),
        ("a basket of striped heirloom tomatoes", "a giant zucchini next to a shoe for scale"),
        ("What was in {P}'s basket?", "What did {P} put a shoe beside for scale?"),
    ),
)

# Open-domain questions name a hobby's category, never the hobby.
CATEGORY_QUESTIONS = {
    "sports": ("What sports does {P} do?", "What does {P} do to stay active?", "Which athletic hobbies has {P} got?"),
    "music": ("Does {P} play any musical instruments?", "What music does {P} make?"),
    "arts and crafts": ("What creative hobbies does {P} have?", "Does {P} make anything by hand?"),
    "cooking": ("What does {P} like to make in the kitchen?",),
    "games": ("Which board games does {P} enjoy?",),
    "gardening": ("Does {P} have a green thumb?",),
}
LIST_HOBBY_QUESTIONS = (
    "What hobbies does {P} have?",
    "What does {P} do in {pos} free time?",
    "Which pastimes has {P} mentioned?",
)


@dataclass(frozen=True)
class PetKind:
    species: str
    descriptions: tuple[str, ...]
    kind_questions: tuple[str, ...]  # open-domain, answered by the adoption turn
    anecdotes: tuple[str, ...]  # said with the name; {name}, {subj}
    vet_reasons: tuple[str, ...]
    tricks: tuple[str, ...]
    captions: tuple[str, ...]  # {desc}


PETS = (
    PetKind(
        "dog",
        ("beagle puppy", "rescue greyhound", "corgi", "golden retriever puppy"),
        ("What kind of animal did {P} adopt?", "Does {P} have a pet? What kind?"),
        (
            "{name}! {subj_cap} already chewed up both my slippers.",
            "We named {obj} {name}, {subj} sleeps 20 hours a day.",
        ),
        ("swallowed a sock", "cut a paw on broken glass at the park"),
        ("sit and shake hands", "ring a bell to go outside"),
        ("a {desc} chewing a blue rope toy on the grass", "a {desc} asleep in a laundry basket"),
    ),
    PetKind(
        "cat",
        ("tabby kitten", "black cat from the shelter", "fluffy Maine Coon"),
        ("What kind of animal did {P} adopt?", "Does {P} have a furry friend at home?"),
        ("{name}, and {subj} has already knocked a plant off the shelf.", "{name}! {subj_cap} hides in the sink."),
        ("ate a hair tie", "got into a fight with the neighbour's tom"),
        ("give a high five", "come when called, like a dog"),
        ("a {desc} sitting inside a cardboard box", "a {desc} sprawled on a laptop keyboard"),
    ),
    PetKind(
        "rabbit",
        ("lop-eared bunny", "little grey rabbit"),
        ("What animal did {P} bring home?", "Does {P} have a pet? What kind?"),
        (
            "{name}. {subj_cap} does little jumps when {subj} is happy.",
            "We called {obj} {name}, {subj} chews every cable.",
        ),
        ("stopped eating for a day", "had overgrown teeth"),
        ("use a litter box", "jump through a hoop"),
        ("a {desc} eating a carrot top on a rug", "a {desc} inside a wicker basket with hay"),
    ),
    PetKind(
        "parrot",
        ("green-cheeked conure", "cockatiel"),
        ("What animal did {P} bring home?", "Does {P} keep a bird?"),
        (
            "{name}! {subj_cap} already screams when I leave the room.",
            "{name}, and {subj} whistles the doorbell sound.",
        ),
        ("plucked some feathers", "hurt a wing hitting a window"),
        ("say hello", "whistle a TV theme song"),
        ("a {desc} perched on a coffee mug", "a {desc} sitting on a shoulder"),
    ),
)
PET_NAME_QUESTIONS = ("What is the name of {P}'s {species}?", "What did {P} call the {species} {subj} adopted?")


@dataclass(frozen=True)
class Trip:
    destination: str
    highlights: tuple[str, ...]  # never repeat the destination's name
    captions: tuple[str, ...]
    highlight_questions: tuple[str, ...]  # single-hop, in other words than the highlight's; {P}
    highlight_echoes: tuple[str, ...]  # single-hop, with some of each highlight's words (in its order); {P}


TRIPS = (
    Trip(
        "Lisbon",
        (
            "We ate way too many custard tarts and rode the old yellow tram up to the castle.",
            "Honestly the best part was a tiny fado bar where a grandma sang.",
        ),
        ("a yellow tram climbing a steep cobbled street",),
        ("What did {P} do in Lisbon?", "What was the highlight of {P}'s Portugal trip?"),
        ("What did {P} ride up to the castle in Lisbon?", "Where did a grandma sing for {P} in Lisbon?"),
    ),
    Trip(
        "Kyoto",
        (
            "We walked through thousands of orange gates up the mountain at dawn.",
            "We stayed in a ryokan with paper walls and ate breakfast on the floor.",
        ),
        ("a path lined with orange torii gates in the morning mist",),
        ("What did {P} see in Kyoto?", "What stood out on {P}'s Japan trip?"),
        ("What did {P} walk through up the mountain in Kyoto?", "What kind of place with paper walls did {P} stay in?"),
    ),
    Trip(
        "Iceland",
        (
            "We saw the northern lights from a hot spring in the middle of nowhere.",
            "We drove the whole ring road in a camper van for a week.",
        ),
        ("green northern lights over a black sand beach",),
        ("What did {P} do in Iceland?", "What was the best part of {P}'s Iceland trip?"),
        ("Where was {P} when {subj} saw the northern lights?", "What did {P} rent to drive the ring road?"),
    ),
    Trip(
        "Banff",
        (
            "We rented a canoe on a lake so blue it looked fake, and saw a grizzly from the car.",
            "Hiked to a teahouse up in the mountains, 7 km uphill.",
        ),
        ("a red canoe on a turquoise glacier lake",),
        ("What did {P} do in Banff?", "What did {P} see in the Canadian Rockies?"),
        ("What did {P} see from the car in Banff?", "Where did {P} hike to in the mountains near Banff?"),
    ),
    Trip(
        "Mexico City",
        (
            "Took a cooking class and learned to make mole from scratch.",
            "Visited Frida Kahlo's blue house, I teared up a little.",
        ),
        ("a bright blue house with a courtyard full of cacti",),
        ("What did {P} do in Mexico City?", "What did {P} learn on the trip to Mexico?"),
        ("What dish did {P} learn to make from scratch in Mexico City?", "Whose blue house did {P} visit?"),
    ),
    Trip(
        "Edinburgh",
        (
            "We hiked Arthur's Seat at sunrise and did a ghost tour in the old town.",
            "It rained every single day but the whisky made up for it.",
        ),
        ("a castle on a rocky hill under grey clouds",),
        ("What did {P} do in Edinburgh?", "What was {P}'s Scotland trip like?"),
        ("What did {P} hike at sunrise in Edinburgh?", "What made up for the rain on {P}'s Edinburgh trip?"),
    ),
    Trip(
        "Marrakech",
        (
            "Got completely lost in the souks and bought a rug I did not need.",
            "We slept in a riad with an orange tree in the courtyard.",
        ),
        ("stacks of colourful spices at a market stall",),
        ("What did {P} buy in Marrakech?", "What happened to {P} in the markets of Morocco?"),
        ("What did {P} buy when {subj} got lost in the souks?", "What grew in the courtyard of {P}'s riad?"),
    ),
    Trip(
        "Cape Town",
        (
            "Hiked up Table Mountain and saw penguins at Boulders Beach the next day.",
            "Went shark cage diving! Never again, but amazing.",
        ),
        ("penguins waddling on a sandy beach between boulders",),
        ("What did {P} do in Cape Town?", "What animals did {P} see in South Africa?"),
        ("Where did {P} see penguins?", "What did {P} say never again to in Cape Town?"),
    ),
    Trip(
        "New Orleans",
        (
            "Live jazz every night on Frenchmen Street and beignets every morning.",
            "We took a swamp tour and saw an alligator up close.",
        ),
        ("a brass band playing on a street corner at night",),
        ("What did {P} do in New Orleans?", "What was {P}'s Louisiana trip like?"),
        ("Where did {P} hear live jazz every night?", "What did {P} see up close on the swamp tour?"),
    ),
    Trip(
        "Seoul",
        (
            "Sang karaoke until 3 am and ate fried chicken at a night market.",
            "We hiked up to a fortress wall above the city.",
        ),
        ("neon signs over a crowded night market street",),
        ("What did {P} do in Seoul?", "What did {P} eat in Korea?"),
        ("How late did {P} sing karaoke in Seoul?", "What did {P} hike up to above the city?"),
    ),
    Trip(
        "Copenhagen",
        (
            "Biked everywhere and ate open sandwiches on a canal boat.",
            "We went to the old amusement park, the wooden roller coaster is terrifying.",
        ),
        ("colourful houses along a canal with bikes parked in front",),
        ("What did {P} do in Copenhagen?", "How did {P} get around in Denmark?"),
        ("What did {P} eat on a canal boat?", "Which roller coaster terrified {P}?"),
    ),
    Trip(
        "Buenos Aires",
        ("Took a tango lesson and stepped on everyone's feet.", "Ate steak so good I almost cried."),
        ("a couple dancing on a cobbled square",),
        ("What did {P} do in Buenos Aires?", "What did {P} try in Argentina?"),
        ("What lesson did {P} take in Buenos Aires?", "What food almost made {P} cry?"),
    ),
)
TRIP_ANNOUNCEMENTS = (
    "Guess who just got back from {dest} {when}!",
    "I was in {dest} {when}, still jet-lagged.",
    "Back from {dest}! We flew home {when}.",
)
TRIP_WHEN_QUESTIONS = ("When did {P} go to {dest}?", "When was {P}'s trip to {dest}?")
TRIP_LIST_QUESTIONS = (
    "Which places has {P} traveled to?",
    "Where has {P} been on vacation?",
    "Which places did {P} get back from this year?",
)
RELATIVE_DAYS = (  # (words, days before the session)
    ("yesterday", 1),
    ("last weekend", 6),
    ("a few days ago", 3),
    ("last week", 8),
    ("two weeks ago", 14),
)


@dataclass(frozen=True)
class Purchase:
    intro: str  # what the buyer says with the photo: never names the object
    caption: str  # the only place the object is named
    find_questions: tuple[str, ...]  # single-hop; {P}
    category_question: str  # open-domain: the object's category; {P}


PURCHASES = (
    Purchase(
        "Look what I found at the flea market this morning!",
        "a vintage brass telescope on a wooden tripod",
        ("What did {P} find at the flea market?",),
        "Did {P} buy any antiques? What?",
    ),
    Purchase(
        "Treated myself to something new for the living room.",
        "a mustard-yellow velvet armchair by a window",
        ("What did {P} get for the living room?",),
        "What piece of furniture did {P} buy?",
    ),
    Purchase(
        "My birthday present to myself finally arrived!",
        "a mint-green Vespa scooter parked on the street",
        ("What did {P} buy as a birthday present to {obj}self?",),
        "What vehicle did {P} buy?",
    ),
    Purchase(
        "New addition to the kitchen, I've wanted one for years.",
        "a shiny red stand mixer on a marble counter",
        ("What did {P} add to the kitchen?",),
        "Which kitchen appliance did {P} buy?",
    ),
    Purchase(
        "Couldn't resist, it was half price at the market.",
        "a giant fiddle-leaf fig in a woven basket",
        ("What did {P} buy at half price?",),
        "What houseplant did {P} get?",
    ),
    Purchase(
        "Guess what came in the mail today.",
        "a record player with a stack of old jazz vinyl",
        ("What came in the mail for {P}?",),
        "What did {P} buy to listen to music on?",
    ),
    Purchase(
        "Finally replaced my old ones, they had holes in them.",
        "a pair of red leather hiking boots",
        ("What did {P} replace because of holes?",),
        "What footwear did {P} buy?",
    ),
    Purchase(
        "Upgraded my desk setup.",
        "a mechanical keyboard with orange keycaps next to a monitor",
        ("How did {P} upgrade the desk?",),
        "What computer gear did {P} buy?",
    ),
    Purchase(
        "I got something for the balcony.",
        "a tiny charcoal grill with two folding chairs",
        ("What did {P} get for the balcony?",),
        "What outdoor cooking equipment did {P} buy?",
    ),
    Purchase(
        "Splurged at the camera shop.",
        "a second-hand film camera with a leather strap",
        ("What did {P} buy at the camera shop?",),
        "What photography equipment does {P} have?",
    ),
)

BOOKS = (
    ("The Salt Orchard", "Mira Okafor"),
    ("A Map of Quiet Places", "Jon Hale"),
    ("Nine Winters", "Ada Lindqvist"),
    ("The Lantern Keeper", "Samir Haddad"),
    ("Paper Rivers", "Lucía Marín"),
    ("The Last Ferry", "Tom Brannigan"),
)
BOOK_LINES = (
    "Just finished {title} by {author}, couldn't put it down.",
    "Stayed up until 2 am finishing {title}. {author} is a genius.",
)
BOOK_QUESTIONS = ("Which novel did {P} just read?", "What book kept {P} up at night?")

VOLUNTEERING = (
    ("I've started helping out at the food bank on Saturday mornings.", "Does {P} do any charity work?"),
    ("I walk dogs for the animal shelter on Sundays now.", "Does {P} volunteer anywhere?"),
    ("I tutor kids in reading at the community centre twice a week.", "Does {P} give time to any good cause?"),
)

CONFERENCE_TOPICS = (
    "burnout on night shifts",
    "teaching with games",
    "accessible playgrounds",
    "fire safety in schools",
    "sugar-free desserts",
    "low-cost solar wiring",
    "reading programs for teens",
)
CONFERENCE_CITIES = ("Chicago", "Denver", "Toronto", "Austin", "Boston", "Atlanta")
NEIGHBORHOODS = ("Maple Heights", "the Old Port", "Riverside", "Cedar Hill", "the Arts District", "Northgate")
INJURIES = (
    ("I sprained my wrist falling off a ladder while painting the hallway.", "How did {P} hurt {pos} wrist?"),
    ("I broke a toe walking into the coffee table in the dark.", "How did {P} break a toe?"),
    ("Got stung by a wasp on my eyelid, my face is lopsided.", "What happened to {P}'s eye?"),
)

GREETINGS = (
    "Hey {other}! How's your week going?",
    "Hi {other}, long time no talk!",
    "Morning {other}! Got a minute?",
    "Hey hey! What's new with you?",
    "Hi! Sorry I went quiet, crazy few days.",
)
GREETING_REPLIES = (
    "Pretty good! Busy but good.",
    "Hey! Not bad, just tired.",
    "All good here, how about you?",
    "Hi!! So nice to hear from you.",
    "Hanging in there, what's up?",
)
GENERIC_REACTIONS = (
    "That's awesome!",
    "Cool! What did it look like?",
    "Haha, love that.",
    "Wow, really?",
    "That sounds amazing!",
    "No way!",
    "So cool.",
    "Tell me more!",
    "How did it go?",
    "I'm so happy for you!",
    "That's wild.",
    "Nice!!",
    "Oh wow, I'd love to see that.",
    "Amazing, good for you.",
    "Ha! Of course.",
)
SYMPATHY = ("Oh no, I'm so sorry!", "Ouch! Hope you feel better soon.", "That sounds awful, take it easy.")
SMALL_TALK = (
    ("It's been raining nonstop here all week.", "Same here, I've forgotten what the sun looks like."),
    ("Did you watch the game last night?", "No, I fell asleep on the couch at nine, haha."),
    ("I really need a vacation.", "Same. We should plan a trip together sometime!"),
    ("My sister called for two hours last night.", "Haha, family calls are never short."),
    ("I've been so tired lately.", "Me too, I think it's the weather."),
    ("Made pancakes for dinner, no regrets.", "Breakfast for dinner is the best dinner."),
    ("Work has been nonstop.", "Hang in there, the weekend is close."),
    ("I finally cleaned out my closet.", "Ooh, I should do that too, it's a disaster."),
    ("Traffic was insane this morning.", "Ugh, I'm so glad I don't drive to work."),
    ("Any plans for the weekend?", "Probably just laundry and a movie, honestly."),
    ("Any plans for the weekend?", "Brunch with my cousins, then absolutely nothing."),
    ("My phone screen cracked again.", "Oh no! Third time this year?"),
    ("The neighbours are renovating, drilling from 7 am.", "That sounds like torture."),
    ("I've been drinking way too much coffee.", "Is there such a thing as too much coffee?"),
    ("It was so hot today, I melted on the way home.", "Summer came out of nowhere!"),
    ("I keep forgetting to call the dentist.", "Do it now, before you forget again, haha."),
    ("I think I'm coming down with a cold.", "Drink some tea and rest up!"),
    ("My landlord finally fixed the heating.", "About time!"),
    ("Have you heard from the old gang lately?", "A little, everyone's so busy these days."),
    ("I've been sleeping so badly.", "Try no screens before bed, it helped me a bit."),
    ("The farmers market had the best peaches today.", "Ooh, I'm jealous, ours is tiny."),
    ("My laptop died in the middle of a video call.", "Classic. Always at the worst moment."),
    ("Is it just me or is this month flying by?", "It's not just you!"),
    ("I need a haircut so badly.", "Same, I look like a hedgehog."),
    ("I burned the rice again.", "Happens to the best of us, haha."),
    ("What are you up to tonight?", "Couch, blanket, snacks. The usual."),
    ("I ordered way too much takeout this week.", "No judgement here."),
    ("The power went out for three hours yesterday.", "Did you at least get an early night?"),
)
SHOWS = ("Harbor Lights", "The Quiet Year", "Midnight Bakers", "Small Town Detectives", "Ocean Below")
SHOW_TALK = ("Have you seen {show}? I binged the whole season.", "Not yet! No spoilers please.")
FOOD_PLACES = ("a new ramen place", "a taco truck near the station", "a Georgian bakery", "a Sichuan restaurant")
FOOD_TALK = ("I tried {place} last night.", "Oh nice, was it any good?", "So good, I'm going back this week.")
# Said around a turn, as people do: real turns carry more than the one thing a question asks about.
CHATTER_BEFORE = ("Oh man.", "Ha!", "Okay, news.", "So.", "Ahh.", "Guess what.", "Sorry, was driving.", "Ok ok.")
CHATTER_AFTER = (
    "Still can't believe it.",
    "Anyway, how are things on your end?",
    "Life's been a lot lately, but good.",
    "Remind me to tell you about my neighbour later.",
    "I'll send more pictures later.",
    "It made my whole week.",
    "Not sure why I'm telling you this, haha.",
    "Crazy, right?",
    "Anyway, enough about me!",
    "My mom says hi, by the way.",
    "I've been meaning to tell you for days.",
    "The weather was perfect for it too.",
    "I need to sleep more, haha.",
    "We should catch up properly soon.",
)
CLOSINGS = (
    ("Anyway, I gotta run. Talk soon!", "Bye! Take care."),
    ("Okay, dinner's ready, catch up later?", "Sounds good, enjoy!"),
    ("I should sleep. Night!", "Good night!"),
    ("Talk to you next week!", "Yes! Bye for now."),
)
MONTHS = tuple("January February March April May June July August September October November December".split())
