#!/bin/bash
wc -c < /app/docs/brave_pine.txt > /app/nectar.txt
