#!/bin/bash
mkdir -p /app/desert && printf '%s\n' 'windy shell arrow' 'timber planet' 'humble marble meteor lily' 'olive hidden misty thistle' > /app/desert/proud_sage.txt
