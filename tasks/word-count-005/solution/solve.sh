#!/bin/bash
wc -c < /app/docs/brave_pine.txt > /app/answer.txt
