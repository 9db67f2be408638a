#!/bin/bash
chmod 444 /app/mesa/gentle_tiger.txt
chmod 750 /app/mesa/olive_timber.sh
chmod 400 /app/mesa/bold_sage.key
