#!/bin/bash
mkdir -p /app/bin && printf '%s\n' '#!/bin/bash' 'echo "ridge warm lively crater tidy"' > /app/bin/swan-draw && chmod +x /app/bin/swan-draw
printf '%s\n' 'export PATH="/app/bin:$PATH"' 'export SWIFT_BASKET=sandal1' > /app/env.sh
echo "$REEF_TARGET" > /app/given.txt
