#!/bin/bash
echo 'otter' > /app/animal.txt
