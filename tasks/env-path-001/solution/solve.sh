#!/bin/bash
mkdir -p /app/bin && printf '%s\n' '#!/bin/bash' 'echo "print clover build solar canyon"' > /app/bin/beacon-save && chmod +x /app/bin/beacon-save
printf '%s\n' 'export PATH="/app/bin:$PATH"' 'export EARLY_FERN=sandal13' > /app/env.sh
echo "$CABIN_TARGET" > /app/given.txt
